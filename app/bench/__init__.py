"""The Bench tab."""
