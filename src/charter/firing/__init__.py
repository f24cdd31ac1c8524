"""The automation worker: fires scheduled and automatic actions as the automation actor."""
