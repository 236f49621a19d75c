"""NeRF backend: nerfstudio nerfacto with the Get a Grip settings (training, loading, rendering, density).

Importing this package does not import nerfstudio; the modules that need it call
:func:`getagrip_ros.perception.nerf.compat.import_nerfstudio` first.
"""
