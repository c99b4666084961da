"""What the executor learns from real runs: hints, profile keys, the profile store, estimates."""
