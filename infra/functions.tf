# ---------------------------------------------------------------------------------------------
# Container images of the two functions, in a repository of our own so the build service
# account's write access is limited to it and old images are cleaned up.
# ---------------------------------------------------------------------------------------------

resource "google_artifact_registry_repository" "functions" {
  location               = var.region
  repository_id          = "${local.prefix}-functions"
  description            = "Images built by Cloud Build for the memrepo functions."
  format                 = "DOCKER"
  kms_key_name           = var.kms_key_name
  labels                 = local.labels
  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "keep-recent"
    action = "KEEP"
    most_recent_versions {
      keep_count = 5
    }
  }

  cleanup_policies {
    id     = "delete-old"
    action = "DELETE"
    condition {
      tag_state  = "ANY"
      older_than = "2592000s"
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.cmek]
}

# ---------------------------------------------------------------------------------------------
# Writer: HTTP-triggered, called only by the writer_push subscription (pubsub.tf). Its entry
# point is a CloudEvent function (@functions_framework.cloud_event); functions-framework turns
# the Pub/Sub push body into the same google.cloud.pubsub.topic.v1.messagePublished CloudEvent
# that an Eventarc trigger would deliver.
# ---------------------------------------------------------------------------------------------

resource "google_cloudfunctions2_function" "writer" {
  name        = "${local.prefix}-writer"
  location    = var.region
  description = "memrepo writer: one SessionEnded event -> one commit in the user's bundle."
  labels      = local.labels

  build_config {
    runtime           = var.python_runtime
    entry_point       = "on_session_ended"
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id

    source {
      storage_source {
        bucket = google_storage_bucket.sources.name
        object = google_storage_bucket_object.writer_source.name
      }
    }
  }

  service_config {
    available_memory                 = var.writer_memory
    available_cpu                    = var.writer_cpu
    timeout_seconds                  = var.writer_timeout_seconds
    min_instance_count               = 0
    max_instance_count               = var.writer_max_instances
    max_instance_request_concurrency = var.writer_concurrency
    ingress_settings                 = var.writer_ingress_settings
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.writer.email
    environment_variables            = local.writer_env

    dynamic "secret_environment_variables" {
      for_each = var.enable_llm ? [google_secret_manager_secret.llm_api_key.secret_id] : []
      content {
        key        = "OPENAI_API_KEY"
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = var.llm_api_key_secret_version
      }
    }
  }

  depends_on = [
    google_storage_bucket_iam_member.writer_bundles_object_user,
    google_secret_manager_secret_iam_member.writer_llm_api_key,
    google_storage_bucket_iam_member.build_sources_viewer,
    google_project_iam_member.build_gcf_sources_viewer,
    google_project_iam_member.build_log_writer,
    google_artifact_registry_repository_iam_member.build_writer,
  ]
}

# ---------------------------------------------------------------------------------------------
# Retrieval: HTTP, never public. Callers need roles/run.invoker (var.retrieval_invoker_members)
# and, when enable_bearer_token, the shared token too.
# ---------------------------------------------------------------------------------------------

resource "google_cloudfunctions2_function" "retrieval" {
  # checkov:skip=CKV_GCP_124: callers are checked by IAM (run.invoker for var.retrieval_invoker_members only, never public); the default ALLOW_ALL ingress lets bots hosted outside Google Cloud reach it. Set var.retrieval_ingress_settings to narrow it.
  name        = "${local.prefix}-retrieval"
  location    = var.region
  description = "memrepo retrieval: POST a conversation, get a context that fits a token budget."
  labels      = local.labels

  build_config {
    runtime           = var.python_runtime
    entry_point       = "get_context"
    service_account   = google_service_account.build.id
    docker_repository = google_artifact_registry_repository.functions.id

    source {
      storage_source {
        bucket = google_storage_bucket.sources.name
        object = google_storage_bucket_object.retrieval_source.name
      }
    }
  }

  service_config {
    available_memory                 = var.retrieval_memory
    available_cpu                    = var.retrieval_cpu
    timeout_seconds                  = var.retrieval_timeout_seconds
    min_instance_count               = 0
    max_instance_count               = var.retrieval_max_instances
    max_instance_request_concurrency = var.retrieval_concurrency
    ingress_settings                 = var.retrieval_ingress_settings
    all_traffic_on_latest_revision   = true
    service_account_email            = google_service_account.retrieval.email
    environment_variables            = local.retrieval_env

    dynamic "secret_environment_variables" {
      for_each = var.enable_llm ? [google_secret_manager_secret.llm_api_key.secret_id] : []
      content {
        key        = "OPENAI_API_KEY"
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = var.llm_api_key_secret_version
      }
    }

    dynamic "secret_environment_variables" {
      for_each = google_secret_manager_secret.auth_token[*].secret_id
      content {
        key        = "MEMREPO_AUTH_TOKEN"
        project_id = var.project_id
        secret     = secret_environment_variables.value
        version    = var.auth_token_secret_version
      }
    }
  }

  depends_on = [
    google_storage_bucket_iam_member.retrieval_bundles_object_viewer,
    google_secret_manager_secret_iam_member.retrieval_llm_api_key,
    google_secret_manager_secret_iam_member.retrieval_auth_token,
    google_storage_bucket_iam_member.build_sources_viewer,
    google_project_iam_member.build_gcf_sources_viewer,
    google_project_iam_member.build_log_writer,
    google_artifact_registry_repository_iam_member.build_writer,
  ]
}
