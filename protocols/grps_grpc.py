"""grps over gRPC: `grps.protos.v1.GrpsService` (protos/grps.proto).

Spec: NetEase-Media/grps docs/2_Interface.md ("RPC接口") and its Python server's GrpcHandler.
Predict, PredictStreaming, Online, Offline, CheckLiveness, CheckReadiness, ServerMetadata and
ModelMetadata share the HTTP adapter's logic (protocols/grps_state.py, protocols/grps_messages.py). As in
grps, failures are reported in the answer's `status` ({code: HTTP status, msg, status: FAILURE})
with gRPC status OK; a streaming call reports a failure as its last message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc

import auth
from core.errors import ApiError, Internal, InvalidArgument, Unavailable
from core.payloads import Caller
from protocols import grps_state as grps
from protocols.grps_messages import GrpsMessage, Prediction, failure, ok
from protocols.proto_modules import grps_pb2_grpc
from protocols.v2_grpc import InvocationHeaders

if TYPE_CHECKING:
    from emulator import Emulator

log = logging.getLogger("mlemu.grps.grpc")


class GrpsServicer(grps_pb2_grpc.GrpsServiceServicer):
    def __init__(self, emu: Emulator) -> None:
        self.emu = emu

    def _caller(self, context: grpc.ServicerContext) -> Caller:
        return auth.identify(self.emu, InvocationHeaders(context))

    def _answer(self, produce: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        """`produce`'s messages; a failure, as grps reports it, ends them."""
        try:
            yield from produce()
        except ApiError as exc:
            yield failure(exc)
        except Exception:
            log.exception("grps gRPC call failed unexpectedly")
            yield failure(Internal("Internal error encountered."))

    def _one(self, produce: Callable[[], Any]) -> Any:
        return next(self._answer(lambda: iter([produce()])))

    def Predict(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._one(lambda: Prediction(self.emu, self._caller(context), request, None).message())

    def PredictStreaming(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        return self._answer(lambda: Prediction(self.emu, self._caller(context), request, None).stream())

    def _set_online(self, context: grpc.ServicerContext, online: bool) -> Any:
        def produce() -> Any:
            grps.set_online(self.emu, self._caller(context), online)
            return ok()

        return self._one(produce)

    def Online(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._set_online(context, True)

    def Offline(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._set_online(context, False)

    def CheckLiveness(self, request: Any, context: grpc.ServicerContext) -> Any:
        return ok()

    def CheckReadiness(self, request: Any, context: grpc.ServicerContext) -> Any:
        if grps.is_ready(self.emu):
            return ok()
        return failure(Unavailable("Service Unavailable"))

    def ServerMetadata(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._one(lambda: ok(GrpsMessage(
            str_data=grps.server_metadata(self.emu, self._caller(context)))))

    def ModelMetadata(self, request: Any, context: grpc.ServicerContext) -> Any:
        def produce() -> Any:
            selector = request.str_data or request.model
            if not selector:
                raise InvalidArgument("No model name: send the model's name in str_data.")
            return ok(GrpsMessage(str_data=grps.model_metadata(self.emu, self._caller(context),
                                                               selector)))

        return self._one(produce)
