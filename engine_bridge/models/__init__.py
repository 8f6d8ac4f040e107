"""Model files: header inspection, pairing checks, conversion, the Hub, the library, synthetic models."""
