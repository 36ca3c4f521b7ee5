"""RocketMQ plain ACL: plain_acl.yml, address rules, and the check of each request against them."""
