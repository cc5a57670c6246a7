# ---------------------------------------------------------------------------------------------
# Session events. The messaging webhook publishes one SessionEnded JSON per finished session.
#
# Delivery is an explicit push subscription (not the Eventarc trigger of a CloudEvent function):
# Eventarc owns the subscription it creates and exposes no dead-letter setting, so only a
# subscription we manage can carry dead_letter_policy. See README.md, "Why a push subscription".
# ---------------------------------------------------------------------------------------------

resource "google_pubsub_topic" "session_ended" {
  name                       = "${local.prefix}-session-ended"
  message_retention_duration = var.session_topic_retention
  kms_key_name               = var.kms_key_name
  labels                     = local.labels

  message_storage_policy {
    allowed_persistence_regions = [var.region]
  }

  depends_on = [google_kms_crypto_key_iam_member.cmek]
}

# Events the writer could not take after max_delivery_attempts deliveries land here, kept for
# dead_letter_retention, for an operator to inspect and republish.
resource "google_pubsub_topic" "dead_letter" {
  name                       = "${local.prefix}-session-ended-dead-letter"
  message_retention_duration = var.dead_letter_retention
  kms_key_name               = var.kms_key_name
  labels                     = local.labels

  message_storage_policy {
    allowed_persistence_regions = [var.region]
  }

  depends_on = [google_kms_crypto_key_iam_member.cmek]
}

# The writer's only trigger: Pub/Sub pushes each event to the writer's URL with an OIDC token of
# the push service account. A non-2xx answer (the writer raises on a transient failure) is a
# nack: Pub/Sub retries with backoff, and after max_delivery_attempts forwards the message to the
# dead-letter topic. The ack deadline is longer than the writer's timeout, so no event is pushed
# again while its first delivery is still running.
resource "google_pubsub_subscription" "writer_push" {
  name                       = "${local.prefix}-writer-push"
  topic                      = google_pubsub_topic.session_ended.id
  ack_deadline_seconds       = var.writer_ack_deadline_seconds
  message_retention_duration = "604800s"
  labels                     = local.labels

  push_config {
    # The topic path in the URL lets functions-framework fill the CloudEvent source
    # (//pubsub.googleapis.com/projects/P/topics/T) as Eventarc would.
    push_endpoint = "${google_cloudfunctions2_function.writer.service_config[0].uri}/${google_pubsub_topic.session_ended.id}"

    oidc_token {
      service_account_email = google_service_account.pubsub_push.email
      audience              = google_cloudfunctions2_function.writer.service_config[0].uri
    }
  }

  retry_policy {
    minimum_backoff = var.retry_minimum_backoff
    maximum_backoff = var.retry_maximum_backoff
  }

  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = var.max_delivery_attempts
  }

  # Never delete the subscription for inactivity (the default is 31 days without deliveries).
  expiration_policy {
    ttl = ""
  }

  lifecycle {
    precondition {
      condition     = var.writer_timeout_seconds < var.writer_ack_deadline_seconds
      error_message = "writer_timeout_seconds must be shorter than writer_ack_deadline_seconds, or Pub/Sub redelivers sessions that are still being written."
    }
  }

  depends_on = [
    google_cloud_run_service_iam_member.writer_invoker_pubsub_push,
    google_service_account_iam_member.pubsub_agent_mints_push_tokens,
    google_pubsub_topic_iam_member.dead_letter_publisher_pubsub_agent,
  ]
}

# For operators: read what the writer gave up on
# (gcloud pubsub subscriptions pull <name> --limit=10, see README.md).
resource "google_pubsub_subscription" "dead_letter_inspect" {
  name                       = "${local.prefix}-dead-letter-inspect"
  topic                      = google_pubsub_topic.dead_letter.id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"
  retain_acked_messages      = false
  labels                     = local.labels

  expiration_policy {
    ttl = ""
  }
}

# ---------------------------------------------------------------------------------------------
# Dead lettering is done by the Pub/Sub service agent: it must be able to publish to the
# dead-letter topic and to acknowledge (subscribe to) the source subscription.
# https://cloud.google.com/pubsub/docs/handling-failures#grant_forwarding_permissions
# ---------------------------------------------------------------------------------------------

resource "google_pubsub_topic_iam_member" "dead_letter_publisher_pubsub_agent" {
  topic  = google_pubsub_topic.dead_letter.id
  role   = "roles/pubsub.publisher"
  member = local.pubsub_service_agent
}

resource "google_pubsub_subscription_iam_member" "writer_push_subscriber_pubsub_agent" {
  subscription = google_pubsub_subscription.writer_push.id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_service_agent
}
