"""Observer kinds: each module exposes ``run(ctx)``; the fleet's kinds map names them."""
