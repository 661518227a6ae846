"""The cluster tier: a real Spark standalone cluster on loopback (a Master, two Workers)."""
