# ---------------------------------------------------------------------------------------------
# Secrets. Terraform creates the containers only: the values are added by an operator with
#   printf %s "$KEY" | gcloud secrets versions add <secret> --data-file=-
# so no secret value ever enters Terraform state or plan output (README.md, "Add secret
# versions"). A function reads the version it names (var.*_secret_version, "latest" by default)
# when an instance starts.
# ---------------------------------------------------------------------------------------------

resource "google_secret_manager_secret" "llm_api_key" {
  secret_id = "${local.prefix}-llm-api-key"
  labels    = local.labels

  replication {
    auto {
      dynamic "customer_managed_encryption" {
        for_each = var.secrets_kms_key_name == null ? [] : [var.secrets_kms_key_name]
        content {
          kms_key_name = customer_managed_encryption.value
        }
      }
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.cmek]
}

resource "google_secret_manager_secret" "auth_token" {
  count     = var.enable_bearer_token ? 1 : 0
  secret_id = "${local.prefix}-auth-token"
  labels    = local.labels

  replication {
    auto {
      dynamic "customer_managed_encryption" {
        for_each = var.secrets_kms_key_name == null ? [] : [var.secrets_kms_key_name]
        content {
          kms_key_name = customer_managed_encryption.value
        }
      }
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.cmek]
}
