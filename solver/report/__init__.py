"""Presentation: tables, pictures, text timelines and the text that commands print. Reads results; computes nothing new."""
