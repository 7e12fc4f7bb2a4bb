"""``async with`` and ``async for`` over a stream: a thread of the event loop's
default executor waits for records (without the GIL); the loop takes them. A
cancelled wait takes nothing, so no record is lost to a cancellation."""

from __future__ import annotations

import asyncio

# How long one executor wait lasts before the loop looks again.
_WAIT = 0.25


async def enter(stream):
    await asyncio.get_running_loop().run_in_executor(None, stream._open)
    return stream


async def exit(stream):
    await asyncio.get_running_loop().run_in_executor(None, stream.close)
    return False


async def next(stream):
    loop = asyncio.get_running_loop()
    while True:
        record = stream._try_next()
        if record is None:
            await loop.run_in_executor(None, stream._wait, _WAIT)
        elif record is True:  # `async for` without `async with`: connect off the loop
            await enter(stream)
        elif record is False:
            raise StopAsyncIteration
        else:
            return record
