-- long only when the run asks for it (params {"slow": true} reach dbt as --vars): the cancel test stops it
{% if var('slow', false) %}
select max(hash(range)) as n from range(100000000000)
{% else %}
select 1 as n
{% endif %}
