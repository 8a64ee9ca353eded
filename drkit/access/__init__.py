"""Who may do what on a cluster: the ACLs each drkit role needs, and checks of them."""
