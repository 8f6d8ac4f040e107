"""The Train tab."""
