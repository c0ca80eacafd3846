"""Stored vectors, below facts/ and sessions/ (which own their tables): a user's vectors held as
int8 rows and kept in step with the changes logged by the database (:mod:`.matrix`), grouped
into cells so that a query reads the nearest ones only (:mod:`.cells`), and a long history's
vectors in a file under the home's cache (:mod:`.file`). The models that make them are
hermes.memory.embeddings."""
