"""The ASGI app of the load test (``gateway_load.py``): one route per way a gateway can trim a
request body, for every provider. ``/echo/P`` parses and re-serializes the body (the floor any
gateway that reads the body pays); ``/dict/P`` parses, runs ``assemble`` and serializes;
``/body/P`` runs ``assemble_body``. Each route does its work on the event loop, as a gateway
that does not hand requests to threads does."""

from __future__ import annotations

import orjson
import workload
from body_path import dict_path
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ringbound.providers import PROVIDERS

ASSEMBLERS = {p: workload.assembler(workload.BUDGET, provider=p) for p in PROVIDERS}


def _json(data: bytes) -> Response:
    return Response(data, media_type="application/json")


async def echo(request: Request) -> Response:
    return _json(orjson.dumps(orjson.loads(await request.body())))


async def dict_route(request: Request) -> Response:
    provider = request.path_params["provider"]
    return _json(dict_path(ASSEMBLERS[provider], provider, await request.body()))


async def body_route(request: Request) -> Response:
    provider = request.path_params["provider"]
    return _json(ASSEMBLERS[provider].assemble_body(await request.body()).body)


app = Starlette(
    routes=[
        Route("/echo/{provider}", echo, methods=["POST"]),
        Route("/dict/{provider}", dict_route, methods=["POST"]),
        Route("/body/{provider}", body_route, methods=["POST"]),
    ]
)
