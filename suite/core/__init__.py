"""The protocols every plug-in implements: the registry, the Scenario, Backend and Target protocols, the ledger,
dtypes, numerics and the verdict rule. The helpers a plug-in may use beside them (tidy rows, tables, charts,
launch geometry, the store) are the kit, `suite.kit`."""
