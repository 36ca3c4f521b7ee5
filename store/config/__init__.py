"""The store's configuration: broker.conf with the broker's defaults, and the files under config/."""
