"""mogg: granularity-aware retrieval for medical QA (MoG, MoGG, RAPTOR ladders; routers; MIRAGE).

Layers, bottom to top. A module imports only from its own layer or the layers below it
(``tests/docs/test_layers.py`` enforces this, lazy imports included, and that there are no cycles):

 1. core        core/: artifacts, text, segments, metrics, vectors, runconfig, threads, slots: the ground floor
 2. data        data: corpora and question sets, validation, download
 3. models      encoders, readers: text encoders and LLM clients (one OpenAI-compatible client)
 4. index       retrieval: BM25, sharded BM25, dense; texts and vectors in, top-k out (no ladders)
 5. ladders     ladders: units, levels, coverage; one builder per method; keys, store, concatenation
 6. search      search: per-ladder retrieval (one retriever per level, Hits, LadderIndex)
 7. selection   selection: MoG eq. 1-2 and the other policies, tree policies included
 8. routing     routing: features, soft labels, objectives, the router model and its training
 9. prepared    prepared: what train and evaluate share for one ladder and question set
10. evaluation  evaluation: policies scored, reports, reader accuracy, sweep collection
11. pipeline    run/pipeline, sharding: the shared stages and the map/reduce builds
12. app         run/: app, route, stages (prepare, frontier, transfer), router_store: what the entry
                points and mogg-route run

Folders show the layers: ``core/`` is layer 1, ``run/`` holds layers 11-12 (what runs), and every
other package is one layer.

A method (MoG, MoGG, RAPTOR, ...) is a ladder builder plus its config file; what only it needs
(extra policies, report sections, staged sharding) hangs off the builder as hooks, so nothing
above the ladders layer names a method.
"""

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("mogg.core",)),
    ("data", ("mogg.data",)),
    ("models", ("mogg.encoders", "mogg.readers")),
    ("index", ("mogg.retrieval",)),
    ("ladders", ("mogg.ladders",)),
    ("search", ("mogg.search",)),
    ("selection", ("mogg.selection",)),
    ("routing", ("mogg.routing",)),
    ("prepared", ("mogg.prepared",)),
    ("evaluation", ("mogg.evaluation",)),
    ("pipeline", ("mogg.run.pipeline", "mogg.sharding")),
    ("app", ("mogg.run",)),  # the rest of run/ (matched after the pipeline layer's mogg.run.pipeline)
)
