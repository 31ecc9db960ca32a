"""What an email says: its catalog-translated built-in templates, apps' own templates
(checked in a sandbox), and the one path both render through (SPEC §14)."""
