output "retrieval_url" {
  description = "URL of the retrieval function (POST JSON; needs an ID token of an invoker member)."
  value       = google_cloudfunctions2_function.retrieval.service_config[0].uri
}

output "writer_url" {
  description = "URL of the writer function (internal; only the push subscription calls it)."
  value       = google_cloudfunctions2_function.writer.service_config[0].uri
}

output "session_topic_id" {
  description = "Full id of the topic the messaging webhook publishes SessionEnded events to."
  value       = google_pubsub_topic.session_ended.id
}

output "session_topic_name" {
  description = "Short name of the session topic (for gcloud pubsub topics publish)."
  value       = google_pubsub_topic.session_ended.name
}

output "dead_letter_topic_id" {
  description = "Full id of the dead-letter topic."
  value       = google_pubsub_topic.dead_letter.id
}

output "dead_letter_subscription" {
  description = "Pull subscription for operators to read dead-lettered events."
  value       = google_pubsub_subscription.dead_letter_inspect.name
}

output "writer_subscription" {
  description = "The push subscription that delivers events to the writer."
  value       = google_pubsub_subscription.writer_push.name
}

output "bundles_bucket" {
  description = "Bucket holding one git bundle per user."
  value       = google_storage_bucket.bundles.name
}

output "store_url" {
  description = "MEMREPO_STORE value the functions use."
  value       = local.store_url
}

output "sources_bucket" {
  description = "Bucket holding the function source archives."
  value       = google_storage_bucket.sources.name
}

output "llm_api_key_secret" {
  description = "Secret Manager secret id of the LLM API key (add a version with gcloud)."
  value       = google_secret_manager_secret.llm_api_key.secret_id
}

output "auth_token_secret" {
  description = "Secret Manager secret id of the retrieval bearer token, or null when enable_bearer_token is false."
  value       = one(google_secret_manager_secret.auth_token[*].secret_id)
}

output "writer_service_account" {
  description = "Email of the writer's runtime service account."
  value       = google_service_account.writer.email
}

output "retrieval_service_account" {
  description = "Email of the retrieval function's runtime service account."
  value       = google_service_account.retrieval.email
}

output "pubsub_push_service_account" {
  description = "Email of the identity Pub/Sub pushes to the writer as."
  value       = google_service_account.pubsub_push.email
}
