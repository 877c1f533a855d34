"""The gRPC server process (V2 GRPCInferenceService, grps GrpsService) and where its calls run."""
