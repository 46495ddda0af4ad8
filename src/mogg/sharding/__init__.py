"""Cluster-scale builds as map/reduce over corpus shards.

* :mod:`mogg.sharding.ladders`: document-local ladders (MoG) with BM25 or dense retriever state.
* :mod:`mogg.sharding.graph`: MoGG in two stages (nodes + node index, then kNN against the full index).
"""

from mogg.sharding.graph import STAGES, build_graph_shard, merge_graph_shards
from mogg.sharding.ladders import SHARDABLE, build_shard, concat_ladders, merge_shards, shard_range

__all__ = ["SHARDABLE", "STAGES", "build_graph_shard", "build_shard", "concat_ladders", "merge_graph_shards",
           "merge_shards", "shard_range"]
