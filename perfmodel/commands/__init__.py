"""One module per subcommand: its parser (add_parser) and its thin body (run)."""
