"""Serializers in Flink's binary formats: the base and byte helpers (:mod:`.base`), atomic
(:mod:`.atomic`) and composite (:mod:`.composite`) types, one per type
(:func:`.lookup.serializer_for`)."""

from .lookup import serializer_for

__all__ = ["serializer_for"]
