"""The pairing panel: target and drafter slots, the compatibility report, the K/V advisor."""
