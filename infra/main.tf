# memrepo on Google Cloud: a writer behind a Pub/Sub push subscription with a dead-letter topic,
# a retrieval HTTP function behind IAM, bundles in a versioned bucket. See README.md.

data "google_project" "this" {
  project_id = var.project_id
}

locals {
  prefix = var.name_prefix

  labels = merge({ app = "memrepo", managed-by = "terraform" }, var.labels)

  # Google-managed identities of this project.
  pubsub_service_agent           = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
  artifactregistry_service_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-artifactregistry.iam.gserviceaccount.com"

  bundles_bucket_name = "${var.project_id}-${local.prefix}-bundles"
  sources_bucket_name = "${var.project_id}-${local.prefix}-sources"
  store_url           = "gs://${local.bundles_bucket_name}/${var.bundles_prefix}"

  writer_archive_path    = coalesce(var.writer_archive_path, "${path.root}/../dist/writer.zip")
  retrieval_archive_path = coalesce(var.retrieval_archive_path, "${path.root}/../dist/retrieval.zip")

  # Environment of the functions: the variables memrepo.settings reads. The API key is a secret
  # environment variable (functions.tf); "auto" uses the LLM when that key is present.
  engine = var.enable_llm ? "auto" : "deterministic"

  writer_env = merge({
    MEMREPO_STORE        = local.store_url
    MEMREPO_ENGINE       = local.engine
    MEMREPO_LLM_BASE_URL = var.llm_base_url
    MEMREPO_WRITER_MODEL = var.writer_model
  }, var.writer_extra_env)

  retrieval_env = merge({
    MEMREPO_STORE           = local.store_url
    MEMREPO_ENGINE          = local.engine
    MEMREPO_LLM_BASE_URL    = var.llm_base_url
    MEMREPO_RETRIEVAL_MODEL = var.retrieval_model
  }, var.retrieval_extra_env)
}
