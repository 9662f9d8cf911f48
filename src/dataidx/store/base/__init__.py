"""The base index, one of the store's nouns: the datasets a build read, their entries (one per
supervised turn), the rows it left out, the rows counted by turns, and the build's provenance.
:class:`.records.Datasets` owns their tables (:mod:`.tables`); :mod:`.arrays` writes and reads
them in bulk, as NumPy arrays."""
