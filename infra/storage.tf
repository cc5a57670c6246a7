# ---------------------------------------------------------------------------------------------
# Bundles: one git bundle per user. Versioned so a bad write can be rolled back; the writer's
# if_generation_match uploads are what keep concurrent sessions from overwriting each other.
# ---------------------------------------------------------------------------------------------

resource "google_storage_bucket" "bundles" {
  # checkov:skip=CKV_GCP_62: reads and writes are audited with Cloud Audit Logs (Data Access logs for storage.googleapis.com, turned on per project: README.md, "Audit"); usage-log objects would copy user ids into a second bucket.
  name                        = local.bundles_bucket_name
  location                    = var.region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false
  labels                      = local.labels

  versioning {
    enabled = true
  }

  # Every session uploads a new generation of the user's bundle: keep replaced versions for
  # noncurrent_version_days, and never more than noncurrent_versions_kept of them.
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  lifecycle_rule {
    condition {
      num_newer_versions = var.noncurrent_versions_kept
      with_state         = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.cmek]
}

# ---------------------------------------------------------------------------------------------
# Function sources: the zips built by scripts/package_functions.py. Object names carry the
# archive's MD5, so a changed archive is a new object and the function is rebuilt.
# ---------------------------------------------------------------------------------------------

resource "google_storage_bucket" "sources" {
  # checkov:skip=CKV_GCP_62: holds only build inputs that are also in git; access is audited with Cloud Audit Logs like the bundles bucket.
  name                        = local.sources_bucket_name
  location                    = var.region
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false
  labels                      = local.labels

  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_days
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  depends_on = [google_kms_crypto_key_iam_member.cmek]
}

resource "google_storage_bucket_object" "writer_source" {
  name         = "writer-${filemd5(local.writer_archive_path)}.zip"
  bucket       = google_storage_bucket.sources.name
  source       = local.writer_archive_path
  content_type = "application/zip"
}

resource "google_storage_bucket_object" "retrieval_source" {
  name         = "retrieval-${filemd5(local.retrieval_archive_path)}.zip"
  bucket       = google_storage_bucket.sources.name
  source       = local.retrieval_archive_path
  content_type = "application/zip"
}
