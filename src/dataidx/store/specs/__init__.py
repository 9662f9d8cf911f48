"""Render specs, one of the store's nouns: how entries were rendered, every entry's lengths and
status under each, its token file and summaries. :class:`.records.Specs` owns their tables
(:mod:`.tables`)."""
