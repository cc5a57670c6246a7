# ---------------------------------------------------------------------------------------------
# Service accounts: one per function, one that Pub/Sub pushes as, one that Cloud Build builds as.
# Every grant is on a single resource (bucket, secret, service, repository) unless the API
# offers nothing narrower (Cloud Logging, the Google-managed gcf-v2-sources bucket).
# ---------------------------------------------------------------------------------------------

resource "google_service_account" "writer" {
  account_id   = "${local.prefix}-writer"
  display_name = "memrepo writer function"
  description  = "Runs the writer: reads and writes bundles, reads the LLM API key."
}

resource "google_service_account" "retrieval" {
  account_id   = "${local.prefix}-retrieval"
  display_name = "memrepo retrieval function"
  description  = "Runs the retrieval function: reads bundles, reads the LLM API key and the bearer token."
}

resource "google_service_account" "pubsub_push" {
  account_id   = "${local.prefix}-push"
  display_name = "memrepo Pub/Sub push identity"
  description  = "Identity in the OIDC token Pub/Sub sends to the writer; may only invoke the writer."
}

resource "google_service_account" "build" {
  account_id   = "${local.prefix}-build"
  display_name = "memrepo function builds"
  description  = "Cloud Build identity for building the two functions."
}

# ---------------------------------------------------------------------------------------------
# Bundles bucket: the writer reads and writes objects, retrieval only reads. Bucket-level grants,
# never project-level, so neither account can touch another bucket.
# ---------------------------------------------------------------------------------------------

resource "google_storage_bucket_iam_member" "writer_bundles_object_user" {
  bucket = google_storage_bucket.bundles.name
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${google_service_account.writer.email}"
}

resource "google_storage_bucket_iam_member" "retrieval_bundles_object_viewer" {
  bucket = google_storage_bucket.bundles.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.retrieval.email}"
}

# ---------------------------------------------------------------------------------------------
# Secrets: accessor on each secret, not on the project.
# ---------------------------------------------------------------------------------------------

resource "google_secret_manager_secret_iam_member" "writer_llm_api_key" {
  secret_id = google_secret_manager_secret.llm_api_key.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.writer.email}"
}

resource "google_secret_manager_secret_iam_member" "retrieval_llm_api_key" {
  secret_id = google_secret_manager_secret.llm_api_key.id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.retrieval.email}"
}

resource "google_secret_manager_secret_iam_member" "retrieval_auth_token" {
  count     = var.enable_bearer_token ? 1 : 0
  secret_id = google_secret_manager_secret.auth_token[0].id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.retrieval.email}"
}

# ---------------------------------------------------------------------------------------------
# Invocation. Gen 2 functions are Cloud Run services of the same name; run.invoker on the service
# is what lets a caller in. Nothing here is granted to allUsers or allAuthenticatedUsers.
# ---------------------------------------------------------------------------------------------

resource "google_cloud_run_service_iam_member" "writer_invoker_pubsub_push" {
  project  = var.project_id
  location = google_cloudfunctions2_function.writer.location
  service  = google_cloudfunctions2_function.writer.name
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.pubsub_push.email}"
}

resource "google_cloud_run_service_iam_member" "retrieval_invokers" {
  for_each = toset(var.retrieval_invoker_members)

  project  = var.project_id
  location = google_cloudfunctions2_function.retrieval.location
  service  = google_cloudfunctions2_function.retrieval.name
  role     = "roles/run.invoker"
  member   = each.value
}

# Pub/Sub mints the push OIDC tokens as pubsub_push. Projects created before 2021-04-08 need this
# grant explicitly; it is scoped to that one service account.
resource "google_service_account_iam_member" "pubsub_agent_mints_push_tokens" {
  service_account_id = google_service_account.pubsub_push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_service_agent
}

# ---------------------------------------------------------------------------------------------
# Build service account (build_config.service_account): logs, push images to our repository,
# read the uploaded sources.
# ---------------------------------------------------------------------------------------------

resource "google_project_iam_member" "build_log_writer" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = "serviceAccount:${google_service_account.build.email}"
}

resource "google_artifact_registry_repository_iam_member" "build_writer" {
  project    = var.project_id
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.writer"
  member     = "serviceAccount:${google_service_account.build.email}"
}

resource "google_storage_bucket_iam_member" "build_sources_viewer" {
  bucket = google_storage_bucket.sources.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.build.email}"
}

# Cloud Functions copies the source archive into its own gcf-v2-sources-<number>-<region> bucket
# and builds from there. That bucket is created by the service, so the grant is conditioned on
# its name instead of being put on the bucket.
resource "google_project_iam_member" "build_gcf_sources_viewer" {
  project = var.project_id
  role    = "roles/storage.objectViewer"
  member  = "serviceAccount:${google_service_account.build.email}"

  condition {
    title       = "gcf-v2-sources-only"
    description = "Only the Cloud Functions source buckets of this project."
    expression  = "resource.name.startsWith(\"projects/_/buckets/gcf-v2-sources-${data.google_project.this.number}-\")"
  }
}

# ---------------------------------------------------------------------------------------------
# Optional CMEK: the Google-managed agents that encrypt for us need the key.
# ---------------------------------------------------------------------------------------------

data "google_storage_project_service_account" "gcs" {
  count   = var.kms_key_name == null ? 0 : 1
  project = var.project_id
}

resource "google_project_service_identity" "secretmanager" {
  provider = google-beta
  count    = var.secrets_kms_key_name == null ? 0 : 1
  project  = var.project_id
  service  = "secretmanager.googleapis.com"
}

locals {
  cmek_grants = {
    for name, grant in {
      storage = {
        key    = var.kms_key_name
        member = var.kms_key_name == null ? "" : "serviceAccount:${data.google_storage_project_service_account.gcs[0].email_address}"
      }
      pubsub = {
        key    = var.kms_key_name
        member = local.pubsub_service_agent
      }
      artifactregistry = {
        key    = var.kms_key_name
        member = local.artifactregistry_service_agent
      }
      secretmanager = {
        key    = var.secrets_kms_key_name
        member = var.secrets_kms_key_name == null ? "" : "serviceAccount:${google_project_service_identity.secretmanager[0].email}"
      }
    } : name => grant if grant.key != null
  }
}

resource "google_kms_crypto_key_iam_member" "cmek" {
  for_each      = local.cmek_grants
  crypto_key_id = each.value.key
  role          = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
  member        = each.value.member
}
