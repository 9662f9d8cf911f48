"""Evidence about data, one of the store's nouns: near duplicates (``dataidx dedup``) and
benchmark leaks (``dataidx decontaminate``), each run a named list of base entries with what was
found per entry. :class:`.records.Evidence` owns their tables (:mod:`.tables`)."""
