"""The embedding engine: the models that turn text into vectors (:mod:`.embedders`: the
``Embedder`` protocol, the home's loaded ``Embedders``, MiniLM and e5), MiniLM's graph
multiplied by its int8 weights (:mod:`.minilm_graph`, :mod:`.int8_weights`), the optimised
graph kept in the home (:mod:`.graph_cache`), and the built-in models' registration as a
default plugin (:mod:`.models`, kept light: loading the plugins loads no engine).

Below facts/ and sessions/, which store and search the vectors (hermes.memory.vectors)."""
