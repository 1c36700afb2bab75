"""The embedded default: local servers and sample data for `drt demo` (never a real cluster)."""
