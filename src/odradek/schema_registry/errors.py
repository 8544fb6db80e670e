"""The registry's REST errors: Confluent Schema Registry's HTTP statuses and ``error_code`` values.

Every error answers ``{"error_code": <int>, "message": <str>}`` with the HTTP status below, as
Confluent's ``io.confluent.kafka.schemaregistry.rest.exceptions.Errors`` does. Raised anywhere in
the package and turned into a response by the API layer.
"""

from __future__ import annotations


class RestError(Exception):
    """An HTTP error with Confluent's body; ``status`` is the HTTP status, ``error_code`` the body's code."""

    status = 500
    error_code = 50001
    default_message = "Error in the backend data store"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def _error(name: str, status: int, code: int, message: str) -> type[RestError]:
    return type(name, (RestError,), {"status": status, "error_code": code, "default_message": message})


BadRequest = _error("BadRequest", 400, 400, "Bad request")
Unauthorized = _error("Unauthorized", 401, 40101, "Unauthorized")
Forbidden = _error("Forbidden", 403, 40301, "User is denied operation on this server.")
NotFound = _error("NotFound", 404, 404, "HTTP 404 Not Found")
SubjectNotFound = _error("SubjectNotFound", 404, 40401, "Subject not found.")
VersionNotFound = _error("VersionNotFound", 404, 40402, "Version not found.")
SchemaNotFound = _error("SchemaNotFound", 404, 40403, "Schema not found")
SubjectSoftDeleted = _error("SubjectSoftDeleted", 404, 40404, "Subject was soft deleted.")
SubjectNotSoftDeleted = _error(
    "SubjectNotSoftDeleted", 404, 40405, "Subject must be soft deleted before being permanently deleted."
)
VersionSoftDeleted = _error("VersionSoftDeleted", 404, 40406, "Version was soft deleted.")
VersionNotSoftDeleted = _error(
    "VersionNotSoftDeleted", 404, 40407, "Version must be soft deleted before being permanently deleted."
)
SubjectConfigNotFound = _error("SubjectConfigNotFound", 404, 40408, "Subject does not have subject-level config.")
SubjectModeNotFound = _error("SubjectModeNotFound", 404, 40409, "Subject does not have subject-level mode.")
MethodNotAllowed = _error("MethodNotAllowed", 405, 405, "HTTP 405 Method Not Allowed")
NotAcceptable = _error("NotAcceptable", 406, 406, "HTTP 406 Not Acceptable")
IncompatibleSchema = _error("IncompatibleSchema", 409, 409, "Schema being registered is incompatible")
PayloadTooLarge = _error("PayloadTooLarge", 413, 413, "Request entity too large")
UnsupportedMediaType = _error("UnsupportedMediaType", 415, 415, "HTTP 415 Unsupported Media Type")
InvalidSchema = _error("InvalidSchema", 422, 42201, "Invalid schema")
InvalidVersion = _error("InvalidVersion", 422, 42202, "Invalid version")
InvalidCompatibilityLevel = _error("InvalidCompatibilityLevel", 422, 42203, "Invalid compatibility level")
InvalidMode = _error("InvalidMode", 422, 42204, "Invalid mode")
OperationNotPermitted = _error("OperationNotPermitted", 422, 42205, "Operation not permitted")
ReferenceExists = _error("ReferenceExists", 422, 42206, "Schema reference exists")
IdDoesNotMatch = _error("IdDoesNotMatch", 422, 42207, "Schema id does not match")
InvalidSubject = _error("InvalidSubject", 422, 42208, "Invalid subject")
SchemaTooLarge = _error("SchemaTooLarge", 422, 42209, "Schema too large")
StoreError = _error("StoreError", 500, 50001, "Error in the backend data store")
OperationTimeout = _error("OperationTimeout", 500, 50002, "Operation timed out")
ForwardingError = _error("ForwardingError", 500, 50003, "Error while forwarding the request to the leader")
UnknownLeader = _error("UnknownLeader", 500, 50004, "Unknown leader")
