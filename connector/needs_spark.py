"""The connector needs PySpark: imported first by the package, so without it importing
``flinkstate.connector`` is one :class:`~flinkstate.state.errors.MissingExtraError` naming
the extra to install, not an error from deep inside."""

from flinkstate.state.extras import require

require("pyspark", "flinkstate.connector")
