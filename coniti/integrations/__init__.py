"""Adapters that make coniti a drop-in memory for agent frameworks (optional extras)."""
