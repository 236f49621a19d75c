"""Why an object cannot be used."""


class ObjectRejected(ValueError):
    """The object cannot be used (broken mesh, wrong size, not watertight, tips over, ...); names the object."""


class MeshFileError(ObjectRejected):
    """A mesh file cannot be read: missing, empty, unsupported type or unparsable contents; names the file."""
