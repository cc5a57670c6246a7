# ---------------------------------------------------------------------------------------------
# Where
# ---------------------------------------------------------------------------------------------

variable "project_id" {
  description = "Google Cloud project that hosts memrepo."
  type        = string
}

variable "region" {
  description = "Region of the functions, the buckets, the Artifact Registry repository and the Pub/Sub message storage."
  type        = string
  default     = "us-central1"
}

variable "name_prefix" {
  description = "Prefix of every resource name (service accounts, buckets, topics, functions, secrets). Lowercase letters, digits and hyphens; at most 20 characters so service account ids stay within 30."
  type        = string
  default     = "memrepo"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,18}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 2-20 characters: a lowercase letter first, then lowercase letters, digits or hyphens, not ending in a hyphen."
  }
}

variable "labels" {
  description = "Extra labels put on every resource that takes labels."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------------------------------------
# Function sources (built by scripts/package_functions.py)
# ---------------------------------------------------------------------------------------------

variable "writer_archive_path" {
  description = "Path of the writer source zip. Null means <repo>/dist/writer.zip (the output of scripts/package_functions.py)."
  type        = string
  default     = null
}

variable "retrieval_archive_path" {
  description = "Path of the retrieval source zip. Null means <repo>/dist/retrieval.zip."
  type        = string
  default     = null
}

variable "python_runtime" {
  description = "Cloud Functions Python runtime of both functions."
  type        = string
  default     = "python312"

  validation {
    condition     = contains(["python311", "python312"], var.python_runtime)
    error_message = "python_runtime must be python311 or python312 (memrepo needs Python >= 3.11)."
  }
}

# ---------------------------------------------------------------------------------------------
# Writer
# ---------------------------------------------------------------------------------------------

variable "writer_memory" {
  description = "Memory of one writer instance (Cloud Functions units: 512M, 1Gi, 2Gi ...)."
  type        = string
  default     = "1Gi"
}

variable "writer_cpu" {
  description = "vCPUs of one writer instance (\"1\" or more is required when writer_concurrency > 1)."
  type        = string
  default     = "1"
}

variable "writer_timeout_seconds" {
  description = "Writer execution timeout. Must stay below writer_ack_deadline_seconds so Pub/Sub does not redeliver a session that is still being written."
  type        = number
  default     = 540

  validation {
    condition     = var.writer_timeout_seconds >= 10 && var.writer_timeout_seconds <= 599
    error_message = "writer_timeout_seconds must be 10-599 (the push ack deadline is at most 600 s)."
  }
}

variable "writer_max_instances" {
  description = "Upper bound on writer instances (caps cost and concurrent bundle uploads)."
  type        = number
  default     = 10
}

variable "writer_concurrency" {
  description = "Requests one writer instance serves at once."
  type        = number
  default     = 1
}

variable "writer_ingress_settings" {
  description = "Writer ingress. Pub/Sub push from the same project counts as internal, so ALLOW_INTERNAL_ONLY keeps the writer off the internet."
  type        = string
  default     = "ALLOW_INTERNAL_ONLY"

  validation {
    condition     = contains(["ALLOW_ALL", "ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB"], var.writer_ingress_settings)
    error_message = "writer_ingress_settings must be ALLOW_ALL, ALLOW_INTERNAL_ONLY or ALLOW_INTERNAL_AND_GCLB."
  }
}

variable "writer_extra_env" {
  description = "Extra plain environment variables of the writer (never secrets: those go to Secret Manager)."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------------------------------------
# Retrieval
# ---------------------------------------------------------------------------------------------

variable "retrieval_memory" {
  description = "Memory of one retrieval instance."
  type        = string
  default     = "1Gi"
}

variable "retrieval_cpu" {
  description = "vCPUs of one retrieval instance (\"1\" or more is required when retrieval_concurrency > 1)."
  type        = string
  default     = "1"
}

variable "retrieval_timeout_seconds" {
  description = "Retrieval execution timeout (the agent has its own, shorter deadline)."
  type        = number
  default     = 60

  validation {
    condition     = var.retrieval_timeout_seconds >= 1 && var.retrieval_timeout_seconds <= 3600
    error_message = "retrieval_timeout_seconds must be 1-3600."
  }
}

variable "retrieval_max_instances" {
  description = "Upper bound on retrieval instances."
  type        = number
  default     = 10
}

variable "retrieval_concurrency" {
  description = "Requests one retrieval instance serves at once (most of a request is spent waiting on the LLM)."
  type        = number
  default     = 4
}

variable "retrieval_ingress_settings" {
  description = "Retrieval ingress. ALLOW_ALL lets bots outside Google Cloud call it; IAM (run.invoker) still decides who may."
  type        = string
  default     = "ALLOW_ALL"

  validation {
    condition     = contains(["ALLOW_ALL", "ALLOW_INTERNAL_ONLY", "ALLOW_INTERNAL_AND_GCLB"], var.retrieval_ingress_settings)
    error_message = "retrieval_ingress_settings must be ALLOW_ALL, ALLOW_INTERNAL_ONLY or ALLOW_INTERNAL_AND_GCLB."
  }
}

variable "retrieval_invoker_members" {
  description = "IAM members allowed to call the retrieval function (roles/run.invoker), e.g. [\"serviceAccount:bot@p.iam.gserviceaccount.com\", \"user:me@example.com\"]. Public members are refused."
  type        = list(string)
  default     = []

  validation {
    condition = alltrue([
      for m in var.retrieval_invoker_members :
      !contains(["allUsers", "allAuthenticatedUsers"], m) && can(regex("^(user|serviceAccount|group|domain|principal|principalSet):", m))
    ])
    error_message = "retrieval_invoker_members must be IAM members such as serviceAccount:... or user:...; allUsers and allAuthenticatedUsers are refused (the retrieval function is never public)."
  }
}

variable "enable_bearer_token" {
  description = "Also require a shared bearer token (MEMREPO_AUTH_TOKEN, from Secret Manager) on retrieval requests, on top of IAM."
  type        = bool
  default     = false
}

variable "auth_token_secret_version" {
  description = "Version of the bearer token secret the retrieval function reads (\"latest\" or a number)."
  type        = string
  default     = "latest"
}

variable "retrieval_extra_env" {
  description = "Extra plain environment variables of the retrieval function (never secrets)."
  type        = map(string)
  default     = {}
}

# ---------------------------------------------------------------------------------------------
# LLM
# ---------------------------------------------------------------------------------------------

variable "enable_llm" {
  description = "Give both functions the LLM API key (as OPENAI_API_KEY, which memrepo uses for any OpenAI-compatible endpoint). False sets MEMREPO_ENGINE=deterministic: no key, no model calls; the secret is still created so it can be filled and enabled later."
  type        = bool
  default     = true
}

variable "llm_base_url" {
  description = "Base URL of the OpenAI-compatible endpoint (OpenAI, OpenRouter, vLLM, llama.cpp server ...)."
  type        = string
  default     = "https://openrouter.ai/api/v1"
}

variable "writer_model" {
  description = "Model the writer uses to update memory files (a model id of llm_base_url's endpoint)."
  type        = string
  default     = "openai/gpt-4o-mini"
}

variable "retrieval_model" {
  description = "Model the retrieval agent uses."
  type        = string
  default     = "openai/gpt-4o-mini"
}

variable "llm_api_key_secret_version" {
  description = "Version of the LLM API key secret the functions read at instance start (\"latest\" or a number to pin)."
  type        = string
  default     = "latest"
}

# ---------------------------------------------------------------------------------------------
# Storage
# ---------------------------------------------------------------------------------------------

variable "bundles_prefix" {
  description = "Object prefix of the bundles inside the bundles bucket (MEMREPO_STORE=gs://<bucket>/<prefix>)."
  type        = string
  default     = "bundles"
}

variable "noncurrent_version_days" {
  description = "Days a replaced (noncurrent) bundle version is kept before deletion."
  type        = number
  default     = 30

  validation {
    condition     = var.noncurrent_version_days >= 1
    error_message = "noncurrent_version_days must be at least 1."
  }
}

variable "noncurrent_versions_kept" {
  description = "At most this many noncurrent versions of one bundle are kept, whatever their age (every session writes a new generation)."
  type        = number
  default     = 20

  validation {
    condition     = var.noncurrent_versions_kept >= 1
    error_message = "noncurrent_versions_kept must be at least 1."
  }
}

variable "kms_key_name" {
  description = "Optional CMEK key (projects/P/locations/REGION/keyRings/R/cryptoKeys/K, in var.region) for the buckets, the Pub/Sub topics and the Artifact Registry repository. Null uses Google-managed keys."
  type        = string
  default     = null
}

variable "secrets_kms_key_name" {
  description = "Optional CMEK key for the Secret Manager secrets. Automatic replication needs a key in the \"global\" location. Null uses Google-managed keys."
  type        = string
  default     = null
}

# ---------------------------------------------------------------------------------------------
# Pub/Sub delivery
# ---------------------------------------------------------------------------------------------

variable "max_delivery_attempts" {
  description = "Deliveries of one session event before Pub/Sub moves it to the dead-letter topic (5-100)."
  type        = number
  default     = 5

  validation {
    condition     = var.max_delivery_attempts >= 5 && var.max_delivery_attempts <= 100
    error_message = "max_delivery_attempts must be 5-100 (the Pub/Sub limits)."
  }
}

variable "writer_ack_deadline_seconds" {
  description = "How long Pub/Sub waits for the writer's HTTP answer before it counts a delivery as failed (at most 600)."
  type        = number
  default     = 600

  validation {
    condition     = var.writer_ack_deadline_seconds >= 10 && var.writer_ack_deadline_seconds <= 600
    error_message = "writer_ack_deadline_seconds must be 10-600."
  }
}

variable "retry_minimum_backoff" {
  description = "Shortest wait before a failed delivery is retried."
  type        = string
  default     = "10s"
}

variable "retry_maximum_backoff" {
  description = "Longest wait before a failed delivery is retried."
  type        = string
  default     = "600s"
}

variable "session_topic_retention" {
  description = "How long the session topic keeps published messages (lets an operator seek a subscription back and replay)."
  type        = string
  default     = "604800s"
}

variable "dead_letter_retention" {
  description = "How long the dead-letter topic keeps messages (at most 31 days)."
  type        = string
  default     = "2678400s"
}
