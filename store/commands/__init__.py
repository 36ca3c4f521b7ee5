"""``rmq-query`` subcommands that make, rebuild and check store directories."""
