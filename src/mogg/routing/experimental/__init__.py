"""Router kinds the project measured as no gain (docs/routers.md says what each measured); reachable
by their config (``router=cross``, ``router=cross_ft``, ``router=committee``) and imported by nothing
outside this folder (the kinds registry finds their saved networks by name)."""
