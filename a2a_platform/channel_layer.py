"""The production channel layer: channels_redis's Redis pub/sub layer, with a way to let go of
a channel.

The platform's channel-layer messages are doorbells (tasks_app.doorbell): a ring nobody
listens for is worth nothing, and the log in PostgreSQL is the truth. Pub/sub fits that: a ring
is one PUBLISH, where channels_redis's original layer runs a Lua script over a sorted set per
group for each ring and a blocking pop with a clean-up script per received message (measured:
blocking sends at 16 clients 56 → 74 req/s on the 2-core box, `docs/decisions.md`).

Two things are added to the layer:
- It keeps each channel made by `new_channel()` subscribed until a `receive()` on it is
  cancelled (Channels' consumers end that way). A waiter that ends after a message arrived
  would leave its channel subscribed for the life of the process; `delete_channel` lets it go.
- Its reader sleeps 0.1 s at a time while the connection has no subscription, so the first
  message after a quiet moment (every blocking send at one client) waited up to 100 ms. One
  channel per event loop stays subscribed for the loop's life, and the reader never sleeps.
"""

from __future__ import annotations

from channels_redis.pubsub import RedisPubSubChannelLayer


class PubSubChannelLayer(RedisPubSubChannelLayer):
    async def new_channel(self, prefix: str = "specific.") -> str:
        layer = self._get_layer()
        if not getattr(layer, "anchored", False):
            layer.anchored = True
            await layer.new_channel("anchor.")
        return await layer.new_channel(prefix)

    async def delete_channel(self, channel: str) -> None:
        """Forget `channel` (made by `new_channel()` on this event loop) and unsubscribe from
        it; nothing if it is not there. Its groups must be left first (`group_discard`)."""
        layer = self._get_layer()
        if layer.channels.pop(channel, None) is not None:
            await layer._get_shard(channel).unsubscribe(channel)
