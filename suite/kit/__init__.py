"""The plug-in kit: helpers a backend or a family may use, apart from the protocols it implements (`suite.core`).

Launch geometry (`launch`, `launch_shape`), tidy rows and their tables (`tidy`, `markdown`), chart helpers
(`chartkit`) and the typed Parquet store (`store`). The kit may import the core; the core never imports the kit,
so a protocol never depends on a helper.
"""
