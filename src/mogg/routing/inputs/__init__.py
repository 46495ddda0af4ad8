"""What a router reads and is trained towards: the feature matrix, soft labels, objectives."""
