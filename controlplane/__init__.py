"""The ml v1 management use cases: one function per method, named by its snake_case method id
(`create_model`, `set_default_version`, ...), each taking `(emu, caller, ...)` and starting with
`auth.authorize`. Modules: models, versions, operations, project (getConfig); operation_work is
what the long-running operations do (emulator.build_emulator registers it with the emulator's
TaskRunner); listing and common hold the shared list and validation rules. Nothing here knows
about HTTP.
"""
