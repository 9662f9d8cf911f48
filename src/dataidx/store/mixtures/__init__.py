"""Mixtures, one of the store's nouns: seeded draws of the base index, their epochs, positions
and draw summaries. :class:`.records.Mixtures` owns their tables (:mod:`.tables`)."""
