"""What a person sees: plain and JSON reports and the live dashboard, all fed by events."""
