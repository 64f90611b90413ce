"""Pool workers: the shared interface (`base`) and its serial, subprocess and Ray backends."""
