terraform {
  # 1.5: `check` blocks and the `import` block; fmt/validate behave the same up to 1.11.
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 6.0"
    }
    # Only for google_project_service_identity (the Secret Manager service agent, needed when the
    # secrets use CMEK).
    google-beta = {
      source  = "hashicorp/google-beta"
      version = "~> 6.0"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}

provider "google-beta" {
  project = var.project_id
  region  = var.region
}
