"""The restore engine: plan, apply, check, the journal, and what it does to git history."""
